"""The crawler end to end in one process: settings, the page task, records, outputs.

A small hand-written site on 127.0.0.1; the generated site and the three stores are in
tests/integration/test_crawler.py.
"""

from __future__ import annotations

import gzip
import http.server
import io
import json
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

import crawlq
from crawlq.cli import cli
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.hosts import limit_key
from crawlq.crawler.pages import page_spec, retry_after
from crawlq.crawler.records import RECORD_FIELDS
from crawlq.crawler.runner import (
    EXIT_CANCELLED,
    EXIT_FINISHED,
    EXIT_NOTHING_FETCHED,
    CrawlRunner,
    crawl_name,
    iter_results,
)
from crawlq.crawls import CrawlState
from crawlq.exceptions import ConfigurationError
from crawlq.fingerprint import fingerprint
from crawlq.jobs import JobState
from crawlq.stores.base import JobFilter

SITE: dict[str, tuple[int, str, str]] = {
    "/": (
        200,
        "text/html",
        '<title>Home</title><a href="/a">a</a> <a href="b">b</a>'
        '<a href="/missing">x</a> <a href="/file.txt">t</a> <a href="/private/p">p</a>'
        '<a href="/broken">broken</a> <a href="mailto:x@example.com">m</a>'
        '<a href="http://other.example/">off site</a>',
    ),
    "/a": (
        200,
        "text/html; charset=utf-8",
        "<title>A \u00e9</title><a href='/'>home</a>"
        "<a href='/b#frag'>b again</a> <a href='/deep'>deep</a>",
    ),
    "/b": (200, "text/html", "<title>B</title><a href='/A'>A is another page</a>"),
    "/A": (200, "text/html", "<title>upper</title>"),
    "/deep": (200, "text/html", "<title>deep</title><a href='/deeper'>deeper</a>"),
    "/deeper": (200, "text/html", "<title>deeper</title>"),
    "/file.txt": (200, "text/plain", "<a href='/not-a-link'>no</a>"),
    "/private/p": (200, "text/html", "<title>private</title>"),
    "/broken": (500, "text/html", "<title>oops</title>"),
    "/robots.txt": (200, "text/plain", "User-agent: *\nDisallow: /private/\n"),
}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        server: Site = self.server  # type: ignore[assignment]
        with server.lock:
            server.hits[self.path] += 1
        status, ctype, body = SITE.get(self.path, (404, "text/html", "<title>404</title>"))
        data = body.encode()
        if "gzip" in (self.headers.get("Accept-Encoding") or "") and self.path == "/a":
            data = gzip.compress(data)
            self.send_response(status)
            self.send_header("Content-Encoding", "gzip")
        else:
            self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Site(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.hits: Counter[str] = Counter()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def config(site: Site, **overrides: Any) -> CrawlConfig:
    settings: dict[str, Any] = {
        "start_urls": (site.url,),
        "allow_private": True,
        "delay": 0.0,
        "host_concurrency": 4,
        "retries": 1,
        **overrides,
    }
    return CrawlConfig(**settings)


def crawl(
    app: crawlq.App, cfg: CrawlConfig, out: Path, concurrency: int = 8
) -> tuple[int, dict[str, dict[str, Any]]]:
    runner = CrawlRunner(app, cfg, output=str(out), concurrency=concurrency, progress=False)
    code = runner.run()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    by_path = {urllib.parse.urlsplit(r["url"]).path: r for r in records}
    assert len(by_path) == len(records), "a page was recorded twice"
    return code, by_path


# -- settings ---------------------------------------------------------------------------


def test_config_round_trips_through_meta() -> None:
    cfg = CrawlConfig(start_urls=("https://example.com/",), allow=("/docs/",), max_pages=5)
    again = CrawlConfig.from_meta(json.loads(json.dumps(cfg.to_meta())))
    assert again == cfg
    assert again.fingerprint() == cfg.fingerprint()
    assert CrawlConfig(start_urls=("https://example.com/",)).fingerprint() != cfg.fingerprint()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"start_urls": ()}, "at least one start URL"),
        ({"start_urls": ("ftp://example.com/",)}, "invalid start URL"),
        ({"scope": "planet"}, "scope must be one of"),
        ({"max_pages": 0}, "max_pages"),
        ({"host_concurrency": 0}, "host_concurrency"),
        ({"delay": -1}, "delay"),
        ({"timeout": 0}, "timeout"),
        ({"retries": -1}, "retries"),
        ({"allow": ("(",)}, "invalid allow pattern"),
        ({"allow_hosts": ("10.0.0.0/33",)}, "not a valid network"),
        ({"user_agent": "x\r\nInjected: 1"}, "User-Agent"),
    ],
)
def test_config_refuses_bad_settings(overrides: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"start_urls": ("https://example.com/",), **overrides}
    with pytest.raises(ConfigurationError, match=message):
        CrawlConfig(**settings)


def test_config_from_meta_without_settings_says_why() -> None:
    with pytest.raises(ConfigurationError, match="not started by `crawlq crawl`"):
        CrawlConfig.from_meta({})
    with pytest.raises(ConfigurationError, match="newer crawlq"):
        CrawlConfig.from_meta({"crawler": {"start_urls": ["http://a/"], "warp": 9}})


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://Example.COM/x", "example.com"),
        ("https://example.com:443/", "example.com"),
        ("http://example.com:8080/", "example.com:8080"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("http://example.com./", "example.com"),
    ],
)
def test_limit_key_is_the_host_and_a_port_that_is_not_the_default(url: str, key: str) -> None:
    assert limit_key(url) == key


def test_retry_after() -> None:
    assert retry_after("120") == 120.0
    assert retry_after("999999") == 3600.0
    assert retry_after(None) is None
    assert retry_after("soon") is None
    now = time.time()
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert 28 <= (retry_after(date, now) or 0) <= 31
    past = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 30))
    assert retry_after(past, now) == 0.0


# -- a crawl ------------------------------------------------------------------------------


def test_crawl_records_every_page_of_the_site_once(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    code, pages = crawl(app, config(site), tmp_path / "out.jsonl")
    assert code == EXIT_FINISHED
    assert set(pages) == {
        "/",
        "/a",
        "/b",
        "/A",
        "/deep",
        "/deeper",
        "/file.txt",
        "/missing",
        "/private/p",
        "/broken",
    }
    for record in pages.values():
        assert list(record) == list(RECORD_FIELDS)
    home = pages["/"]
    assert home["status"] == 200 and home["title"] == "Home" and home["depth"] == 0
    assert home["referrer"] is None and home["links_found"] == 7  # http(s) links only
    assert len(home["sha256"]) == 64 and home["bytes"] > 0 and home["error"] is None
    assert pages["/a"]["title"] == "A \u00e9" and pages["/a"]["depth"] == 1
    assert pages["/a"]["referrer"] == site.url
    assert pages["/deeper"]["depth"] == 3
    assert pages["/missing"]["status"] == 404 and pages["/missing"]["error"] is None
    assert pages["/file.txt"]["content_type"] == "text/plain"
    assert pages["/file.txt"]["links_found"] == 0  # not HTML: not parsed
    assert pages["/private/p"]["error"] == "robots.txt disallows it"
    assert pages["/broken"]["status"] == 500
    # each page fetched once; the 500 once per attempt; robots.txt once; nothing else
    assert site.hits["/broken"] == 2
    assert site.hits["/robots.txt"] == 1
    assert site.hits["/private/p"] == 0
    assert "/not-a-link" not in site.hits
    assert all(n == 1 for path, n in site.hits.items() if path != "/broken")
    info = app.crawls()[0]
    assert info.dead == 1 and info.state.value == "finished"


def test_scope_depth_pages_and_ignore_robots(app: crawlq.App, site: Site, tmp_path: Path) -> None:
    cfg = config(site, max_depth=1, obey_robots=False, deny=("/file",))
    code, pages = crawl(app, cfg, tmp_path / "out.jsonl")
    assert code == EXIT_FINISHED
    assert set(pages) == {"/", "/a", "/b", "/missing", "/private/p", "/broken"}
    assert pages["/private/p"]["status"] == 200
    assert site.hits["/robots.txt"] == 0


@pytest.mark.parametrize("concurrency", [1, 4])
def test_max_pages_records_exactly_that_many_and_runs_no_page_more(
    app: crawlq.App, site: Site, tmp_path: Path, concurrency: int
) -> None:
    cfg = config(site, max_pages=3, host_concurrency=concurrency, retries=0)
    code, pages = crawl(app, cfg, tmp_path / "out.jsonl", concurrency=concurrency)
    assert code == EXIT_FINISHED
    assert len(pages) == 3
    assert sum(site.hits.values()) == 3 + 1  # robots.txt
    info = app.crawls()[0]
    assert info.state.value == "finished" and info.done + info.dead == 3
    assert info.pending == info.running == 0


def huge_page(links: int) -> tuple[int, str, str]:
    return 200, "text/html", "".join(f'<a href="/n/{i}">{i}</a>' for i in range(links))


def test_max_pages_caps_the_links_of_a_page_with_150000_links(
    app: crawlq.App, site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SITE, "/huge", huge_page(150_000))
    cfg = config(site, start_urls=(site.url + "huge",), max_pages=20)
    code, pages = crawl(app, cfg, tmp_path / "out.jsonl")
    assert code == EXIT_FINISHED
    assert len(pages) == 20 and pages["/huge"]["links_found"] == 150_000
    info = app.crawls()[0]
    assert info.state.value == "finished"
    assert info.done + info.dead == 20 and info.pending == info.running == 0
    assert info.seen <= 20 + 1  # the page added only what the cap had room for
    assert not app.store.job_list(JobFilter(state=JobState.PENDING))


def test_links_a_page_scheduled_before_are_not_sent_to_the_store_again(
    app: crawlq.App, site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page of a menu links to all the others and to the start page: each is sent
    once as a child and the start page never, as later pages skip the links this
    process has scheduled (``Store.seen_known``), without changing what is crawled."""
    menu = [f"/m{i}" for i in range(6)]
    links = "".join(f'<a href="{path}">{path}</a>' for path in ["/", *menu])
    for path in ["/", *menu]:
        monkeypatch.setitem(SITE, path, (200, "text/html", f"<title>{path}</title>{links}"))
    store = app.store
    sent: list[bytes] = []
    complete, complete_claim = store.job_complete, store.job_complete_claim

    def count(completions: Any) -> None:
        sent.extend(c.fingerprint for done in completions for c in done.children if c.fingerprint)

    def job_complete(completions: Any, **kwargs: Any) -> Any:
        count(completions)
        return complete(completions, **kwargs)

    def job_complete_claim(completions: Any, params: Any) -> Any:
        count(completions)
        return complete_claim(completions, params)

    monkeypatch.setattr(store, "job_complete", job_complete)
    monkeypatch.setattr(store, "job_complete_claim", job_complete_claim)
    code, pages = crawl(app, config(site, host_concurrency=1), tmp_path / "out.jsonl", 1)
    assert code == EXIT_FINISHED
    assert set(pages) == {"/", *menu}
    assert all(pages[p]["links_found"] == 7 for p in pages)  # what the page has, as before
    assert sorted(sent) == sorted(fingerprint(site.url + p[1:]) for p in menu)
    assert all(site.hits[p] == 1 for p in ["/", *menu])


def test_max_pages_drops_the_pending_pages_once_reached_and_finishes_once(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    """Pages queued beyond the cap (here by a crawl created before the cap applied) are
    dropped at once when it is reached: the crawl finishes once, with its on_finish, and
    the same command then starts a new crawl instead of reopening it."""

    @app.task(name="crawl_done")
    def crawl_done(ctx: crawlq.JobContext, crawl_id: int) -> None:
        pass

    cfg = config(site, max_pages=2, host_concurrency=1, retries=0)
    links = ["/a", "/b", "/missing", "/file.txt", "/deep", "/deeper", "/A"]
    start = [page_spec(app, site.url + link[1:]) for link in ["/", *links]]
    crawl_id = app.crawl(
        crawl_name(cfg), start, meta=cfg.to_meta(), limits=cfg.limits, on_finish=crawl_done
    ).id
    code, pages = crawl(app, cfg, tmp_path / "out.jsonl", concurrency=1)
    assert code == EXIT_FINISHED and len(pages) == 2
    assert sum(site.hits.values()) == 2 + 1  # robots.txt
    info = app.get_crawl(crawl_id)
    assert info.state.value == "finished" and info.done + info.dead == 2
    assert info.cancelled == len(start) - 2 and info.pending == 0
    jobs = app.store.job_list(JobFilter(task=crawl_done.name))
    assert [job.kwargs for job in jobs] == [{"crawl_id": crawl_id}]
    assert CrawlRunner(app, cfg, progress=False).start().id != crawl_id


def test_refused_start_url_exits_3_and_connects_nowhere(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    code, pages = crawl(app, config(site, allow_private=False), tmp_path / "out.jsonl")
    assert code == EXIT_NOTHING_FETCHED
    assert pages["/"]["error"].startswith("refused:")
    assert not site.hits


def test_warc_holds_the_decoded_bodies(app: crawlq.App, site: Site, tmp_path: Path) -> None:
    warc = tmp_path / "pages.warc.gz"
    code, _ = crawl(app, config(site, warc=str(warc), max_depth=1), tmp_path / "o.jsonl")
    assert code == EXIT_FINISHED
    bodies = {}
    with open(warc, "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type == "response":
                uri = record.rec_headers.get_header("WARC-Target-URI")
                assert record.http_headers.get_header("Content-Encoding") is None
                bodies[uri.split("/", 3)[3]] = record.content_stream().read()
    assert bodies["a"] == SITE["/a"][2].encode()  # served gzip, stored decoded
    assert bodies[""] == SITE["/"][2].encode()


def test_same_command_resumes_the_open_crawl(app: crawlq.App, site: Site) -> None:
    cfg = config(site)
    first = CrawlRunner(app, cfg, progress=False).start()
    again = CrawlRunner(app, cfg, progress=False)
    assert again.start().id == first.id and again.resumed
    other = CrawlRunner(app, config(site, max_depth=2), progress=False).start()
    assert other.id != first.id  # other settings: another crawl
    fresh = CrawlRunner(app, cfg, progress=False, new=True).start()
    assert fresh.id not in (first.id, other.id)


def test_cli_crawl_and_export(site: Site, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    out = tmp_path / "pages.jsonl"
    result = runner.invoke(
        cli,
        [
            "crawl",
            site.url,
            "--store",
            store,
            "--allow-private",
            "--delay",
            "0",
            "--retries",
            "0",
            "--max-depth",
            "1",
            "-o",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "finished" in result.output
    exported = tmp_path / "again.jsonl"
    result = runner.invoke(cli, ["crawl-export", "1", "--store", store, "-o", str(exported)])
    assert result.exit_code == 0, result.output
    assert exported.read_text() == out.read_text()
    assert len(out.read_text().splitlines()) == 7
    result = runner.invoke(cli, ["crawl-export", "7", "--store", store])
    assert result.exit_code == 1 and "no crawl has id 7" in result.output


def test_cli_detach_then_a_worker_does_the_work(site: Site, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "crawl",
            site.url,
            "--store",
            store,
            "--allow-private",
            "--delay",
            "0",
            "--max-depth",
            "0",
            "--detach",
        ],
    )
    assert result.exit_code == 0, result.output
    crawl_id = int(result.stdout.split()[0])
    assert not site.hits
    result = runner.invoke(cli, ["worker", "--store", store, "--runtime", "asyncio", "--burst"])
    assert result.exit_code == 0, result.output
    app = crawlq.App(store)
    try:
        assert app.get_crawl(crawl_id).state.value == "finished"
        assert [json.loads(t)["url"] for _, t in iter_results(app, crawl_id)] == [site.url]
    finally:
        app.close()


def test_ignore_robots_warns(site: Site, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "crawl",
            site.url,
            "--store",
            f"sqlite:///{tmp_path / 'c.db'}",
            "--allow-private",
            "--ignore-robots",
            "--max-depth",
            "0",
            "-o",
            "-",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "warning: --ignore-robots" in result.output


def test_cli_crawl_with_two_processes(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "pages.jsonl"
    result = CliRunner().invoke(
        cli,
        ["crawl", site.url, "--store", f"sqlite:///{tmp_path / 'c.db'}", "--allow-private",
         "--delay", "0", "--retries", "0", "--processes", "2", "-o", str(out), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 10
    assert all(n == 1 for n in site.hits.values())


def test_a_cancelled_crawl_exits_1(app: crawlq.App, site: Site, tmp_path: Path) -> None:
    runner = CrawlRunner(app, config(site), output=str(tmp_path / "o.jsonl"), progress=False)
    crawl_id = runner.start().id
    assert app.cancel_crawl(crawl_id)
    assert runner.run() == EXIT_CANCELLED
    again = CrawlRunner(app, config(site), progress=False)
    assert again.start().id != crawl_id and not again.resumed  # a closed crawl is not resumed


@pytest.mark.parametrize("flag", ["-o", "--warc"])
def test_cli_refuses_an_output_path_in_a_missing_directory_before_creating_anything(
    site: Site, tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "c.db"
    missing = tmp_path / "missing" / "dir"
    args = ["crawl", site.url, "--store", f"sqlite:///{db}", "--allow-private", "--no-progress"]
    result = CliRunner().invoke(cli, [*args, flag, str(missing / "x.out")])
    assert result.exit_code == 1
    what = "the output file" if flag == "-o" else "the WARC file"
    assert result.output.splitlines() == [
        f"Error: cannot write {what} {missing / 'x.out'}: the directory {missing} does not "
        "exist (create it first, or give a path in an existing directory)"
    ]
    assert not (tmp_path / "missing").exists()  # no directory made, no store, no crawl
    assert not db.exists() and not site.hits


def test_runner_refuses_an_unwritable_output_before_creating_the_crawl(
    app: crawlq.App, site: Site, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="is a directory"):
        CrawlRunner(app, config(site), output=str(tmp_path), progress=False).start()
    with pytest.raises(ConfigurationError, match="does not exist"):
        CrawlRunner(app, config(site, warc=str(tmp_path / "no" / "x.warc.gz"))).start()
    assert app.crawls() == [] and not (tmp_path / "no").exists()


def test_rate_after_a_resume_counts_only_this_runs_pages_and_counts_read_well(
    app: crawlq.App, site: Site
) -> None:
    """A resumed crawl already holds 90 records: this run records the site's 10 pages,
    so over 2 s its rate is 5.0 pages/s, not 50 (all pages over this run's time)."""
    console = Console(file=io.StringIO(), width=300)
    runner = CrawlRunner(app, config(site), progress=False, console=console)
    crawl_id = runner.start().id
    old = [
        (fingerprint(f"http://old.example/{i}"), json.dumps({"url": f"http://old/{i}"}))
        for i in range(90)
    ]
    app.store.result_add(crawl_id, old)
    assert runner.run() == EXIT_FINISHED
    assert runner.tally.pages == 100
    runner._summary(CrawlState.FINISHED, 2.0)
    assert runner._line(app.get_crawl(crawl_id), 2.0).plain.startswith(
        f"crawl {crawl_id} finished  100 pages (10 in this run)"
    )
    assert "5.0 pages/s" in runner._line(app.get_crawl(crawl_id), 2.0).plain
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "100 pages (" in text and "10 pages in this run, 5.0 pages/s" in text


def test_summary_says_1_page_and_1_http_error(app: crawlq.App, site: Site) -> None:
    console = Console(file=io.StringIO(), width=300)
    cfg = config(site, start_urls=(site.url + "missing",))
    assert CrawlRunner(app, cfg, progress=False, console=console).run() == EXIT_FINISHED
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert ": 1 page (0 ok, 1 HTTP error, 0 failed, 0 disallowed by robots.txt), " in text
    assert "in this run" not in text


@pytest.mark.parametrize("url", ["127.0.0.1:18082/", "localhost:8000", "example.com:8080/x"])
def test_a_start_url_without_scheme_says_to_add_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        CrawlConfig(start_urls=(url,))
    assert str(caught.value) == (
        f"invalid start URL {url!r}: no scheme; add http:// or https:// (http://{url})"
    )


@pytest.mark.parametrize("obey_robots", [True, False])
def test_a_refused_connection_is_named_as_such_not_blamed_on_robots_txt(
    app: crawlq.App, tmp_path: Path, obey_robots: bool
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        cfg = CrawlConfig(start_urls=(url,), allow_private=True, retries=0, obey_robots=obey_robots)
        runner = CrawlRunner(app, cfg, output=str(tmp_path / "o.jsonl"), progress=False)
        assert runner.run() == EXIT_NOTHING_FETCHED
    [record] = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    refused = "ConnectError: connection refused: nothing accepts connections on that host"
    assert record["error"].startswith(refused), record["error"]
    assert ("robots.txt" in record["error"]) == obey_robots  # said where, not blamed
    assert "unavailable" not in record["error"]


def test_max_pages_is_reached_when_pages_link_to_seen_pages_first(
    app: crawlq.App, site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page links back to the start first (a site's menu): links already seen take
    no place, so the crawl still reaches its cap (it stopped at 3 of 4)."""
    for path, links in {
        "/nav/": ["/nav/", "/nav/a", "/nav/b"],
        "/nav/a": ["/nav/", "/nav/b", "/nav/c"],
        "/nav/b": ["/nav/", "/nav/a", "/nav/d"],
    }.items():
        body = "".join(f'<a href="{link}">x</a>' for link in links)
        monkeypatch.setitem(SITE, path, (200, "text/html", body))
    cfg = config(site, start_urls=(site.url + "nav/",), max_pages=4, host_concurrency=1)
    code, pages = crawl(app, cfg, tmp_path / "out.jsonl", concurrency=1)
    assert code == EXIT_FINISHED
    assert set(pages) == {"/nav/", "/nav/a", "/nav/b", "/nav/c"}
