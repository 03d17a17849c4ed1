"""The generated crawl site (tests/crawlsite.py): it serves what its model says.

The model is proven against the served site by a small crawler written here on top of
the real fetcher (``crawlq.crawler.fetch``), ``extract_links``, ``Scope`` and ``Robots``:
the URLs it records, their depth, outcome and final URL, and the requests the server
saw must equal ``site.expected(...)``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from crawlq.crawler.addresses import AddressPolicy, resolve_checked
from crawlq.crawler.fetch import Fetcher, FetchResult, FetchSettings
from crawlq.crawler.links import Scope, ScopeMode, extract_links, is_html, page_title
from crawlq.crawler.robots import Robots, robots_url
from crawlq.exceptions import AddressRefused
from crawlq.fingerprint import canonical_url
from tests import crawlsite
from tests.crawlsite import (
    LOOPBACK_SPELLINGS,
    PRIVATE_SPELLINGS,
    SPELLINGS,
    CrawlSite,
    Outcome,
    Sentinel,
    SiteSpec,
)

crawl_site = crawlsite.crawl_site  # the factory fixture, used by name

OPEN = AddressPolicy(allow_private=True)
SMALL = SiteSpec(pages=300, slow_seconds=0.05)
CRAWLED = SiteSpec(pages=100, links_per_page=3, slow_seconds=0.05)
ATTEMPTS = 4  # the mini crawler's attempts on 429, 500 and 503


@pytest.fixture(scope="module")
def site() -> Iterator[CrawlSite]:
    with CrawlSite(SMALL) as served:
        yield served


# --- a small crawler on the real fetcher ---------------------------------------------------


@dataclass
class Seen:
    depth: int
    outcome: Outcome
    final_url: str | None
    status: int | None


def _outcome(result: FetchResult) -> Outcome:
    error = result.error or ""
    if error.startswith("redirect loop"):
        return "redirect-loop"
    if error.startswith("too many redirects"):
        return "too-many-redirects"
    if "body over" in error:
        return "too-big"
    if error.startswith("deadline"):
        return "timeout"
    if error.startswith("dns") or error.startswith("refused"):
        return "unreachable"
    assert not error, error
    if result.status == 404:
        return "not-found"
    if result.status is not None and result.status >= 500:
        return "server-error"
    assert result.status == 200, result
    return "ok"


async def _crawl(
    start: str,
    *,
    scope: ScopeMode = "host",
    follow_nofollow: bool = False,
    obey_robots: bool = True,
    max_depth: int | None = None,
    deadline: float = 1.0,
) -> dict[str, Seen]:
    settings = FetchSettings(
        policy=OPEN,
        deadline=deadline,
        max_body_bytes=2 * 1024 * 1024,
        max_decoded_bytes=4 * 1024 * 1024,
    )
    scoper = Scope(start_urls=(start,), mode=scope, max_depth=max_depth)
    seen: dict[str, Seen] = {}
    robots: dict[str, Robots] = {}
    limit = asyncio.Semaphore(16)
    async with Fetcher(settings) as fetcher:

        async def rules(url: str) -> Robots:
            key = robots_url(url)
            if key not in robots:
                result = await fetcher.fetch(key)
                if result.error is None and result.status == 200:
                    robots[key] = Robots.parse(result.body.decode(), key)
                else:
                    robots[key] = Robots.unavailable(result.status, key)
            return robots[key]

        async def visit(url: str, depth: int) -> list[str]:
            async with limit:
                offsite = (urllib.parse.urlsplit(url).hostname or "").endswith(".invalid")
                if obey_robots and not offsite:  # off-site: the model says unreachable
                    allowed = await rules(url)
                    if not allowed.allowed(url, settings.user_agent):
                        outcome: Outcome = (
                            "robots-unavailable" if allowed.temporary else "robots-disallowed"
                        )
                        seen[url] = Seen(depth, outcome, None, None)
                        return []
                for _ in range(ATTEMPTS):
                    result = await fetcher.fetch(url)
                    if result.error or result.status not in (429, 500, 503):
                        break
                outcome = _outcome(result)
                final = canonical_url(result.final_url) if result.status else None
                seen[url] = Seen(depth, outcome, final, result.status)
                if outcome != "ok" or not is_html(result.content_type):
                    return []
                return extract_links(result.body, result.final_url, follow_nofollow=follow_nofollow)

        level = [canonical_url(start)]
        known = set(level)
        depth = 0
        if obey_robots:
            await rules(start)
        while level:
            found = await asyncio.gather(*(visit(url, depth) for url in level))
            depth += 1
            level = []
            for links in found:
                for link in links:
                    url = canonical_url(link)
                    if url not in known and scoper.admits(url, depth):
                        known.add(url)
                        level.append(url)
    return seen


SETTINGS: list[dict[str, object]] = [
    {},
    {"follow_nofollow": True, "obey_robots": False},
    {"max_depth": 2},
    {"max_depth": 0},
    {"scope": "any", "follow_nofollow": True, "max_depth": 1},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=[repr(s) for s in SETTINGS])
def test_the_model_equals_a_crawl_of_the_served_site(settings: dict[str, object]) -> None:
    with CrawlSite(CRAWLED) as site:
        crawled = asyncio.run(_crawl(site.url, **settings))  # type: ignore[arg-type]
        expected = site.expected(**settings)  # type: ignore[arg-type]
        assert set(crawled) == expected.urls
        for url, page in expected.pages.items():
            got = crawled[url]
            assert (got.depth, got.outcome) == (page.depth, page.outcome), url
            if page.outcome not in ("timeout", "unreachable") and page.fetched:
                assert got.final_url == page.final_url, url
                assert got.status == page.status, url
        # the server saw exactly the requests the model predicts
        counts = site.fetch_counts()
        predicted = expected.requests(robots=bool(settings.get("obey_robots", True)))
        if "/error/500" in counts:
            predicted["/error/500"] = ATTEMPTS
        assert counts == predicted
        assert not any(path.startswith("/trap/") for path in counts)
        if settings == {"follow_nofollow": True, "obey_robots": False}:
            # every resource is reachable from home (the traps are never linked from HTML)
            hops = range(11, CRAWLED.long_redirect_hops + 1)  # past max_redirects
            beyond = {f"/redirect/long/{hop}" for hop in hops}
            resources = {p for p in site.model.resources if not p.startswith("/trap/")}
            assert set(counts) == resources - beyond


def test_defaults_give_a_site_of_a_few_thousand_pages() -> None:
    site = CrawlSite()  # not started: the model only
    expected = site.model.expected("http://127.0.0.1:8000")
    assert 2000 < len(expected.pages) < 5000
    depths = expected.depths()
    assert depths["http://127.0.0.1:8000/"] == 0
    assert max(depths.values()) < 12
    outcomes = expected.outcomes()
    assert outcomes["robots-disallowed"] == 2
    assert outcomes["not-found"] == 5
    assert outcomes["too-big"] == 3
    page = expected.pages["http://127.0.0.1:8000/redirect/dup"]
    assert page.final_url == "http://127.0.0.1:8000/p/1"
    assert page.redirects == ("http://127.0.0.1:8000/redirect/dup",)
    assert expected.requests()["/p/1"] == 2
    # robots.txt failing: Google's rules
    for mode, outcome in (("500", "robots-unavailable"), ("hang", "robots-unavailable")):
        failed = site.model.expected("http://127.0.0.1:8000", robots_mode=mode)  # type: ignore[arg-type]
        assert next(iter(failed.pages.values())).outcome == outcome
        assert len(failed.pages) == 1
    no_file = site.model.expected("http://127.0.0.1:8000", robots_mode="404")
    assert "robots-disallowed" not in no_file.outcomes()


def test_the_model_is_deterministic_and_seeded() -> None:
    one = CrawlSite(SiteSpec(pages=200, seed=7)).model.resources
    two = CrawlSite(SiteSpec(pages=200, seed=7)).model.resources
    three = CrawlSite(SiteSpec(pages=200, seed=8)).model.resources
    assert one == two
    assert one != three


# --- what is served -----------------------------------------------------------------------


def test_pages_and_spellings(site: CrawlSite) -> None:
    with httpx.Client(base_url=site.origin) as client:
        page = client.get("/p/5")
        assert page.status_code == 200
        assert page_title(page.text) == "Page 5"
        assert page.headers["content-type"].startswith("text/html")
        for spelling in ("/p/%35", "/p/5?", "/p/./5", "/p/../p/5", "/p//../5"):
            assert client.get(spelling).text == page.text, spelling
        home = client.get("/")
        assert page_title(home.text) == "Home"
        links = extract_links(home.text, site.url)
        assert site.url_for("/p/1") in {canonical_url(u) for u in links}
        assert client.get("/q?b=10&a=0").text == client.get("/q?a=0&b=10").text
        assert client.get("/nowhere").status_code == 404
    counts = site.fetch_counts()
    assert counts["/p/5"] >= 6
    assert counts["/q?a=0&b=10"] >= 2
    assert len(site.requests_for("/p/%35")) == counts["/p/5"]


def test_every_spelling_is_used_and_equal(site: CrawlSite) -> None:
    used: Counter[str] = Counter()
    for resource in site.model.resources.values():
        for link in resource.links:
            if link.spelling in SPELLINGS:
                used[link.spelling] += 1
                filled = site.model.fill(link.href, site.origin, site.port)
                url = urllib.parse.urljoin(site.origin + resource.path, filled.strip())
                assert canonical_url(url).startswith(site.origin + "/p/"), link
    assert set(used) == set(SPELLINGS)


def test_redirects_errors_and_retries(site: CrawlSite) -> None:
    site.reset()
    with httpx.Client(base_url=site.origin) as client:
        for code in (301, 302, 307, 308):
            first = client.get(f"/redirect/{code}/1")
            assert first.status_code == code
            assert first.headers["location"] == f"/redirect/{code}/2"
            second = client.get(first.headers["location"])
            assert second.headers["location"] == f"{site.origin}/landing/{code}/"
        assert client.get("/loop/b").headers["location"] == "/loop/a"
        assert client.get("/redirect/dup").headers["location"] == "/p/1"
        assert [client.get("/flaky/500").status_code for _ in range(4)] == [500, 500, 200, 200]
        limited = client.get("/flaky/429")
        assert (limited.status_code, limited.headers["retry-after"]) == (429, "1")
        assert client.get("/flaky/429").status_code == 200
        unavailable = client.get("/flaky/503")
        assert (unavailable.status_code, unavailable.headers["retry-after"]) == (503, "1")
        assert [client.get("/error/500").status_code for _ in range(3)] == [500] * 3
        assert client.get("/missing/0").status_code == 404
        site.reset()
        assert client.get("/flaky/500").status_code == 500
        started = time.monotonic()
        assert client.get("/slow/0").status_code == 200
        assert time.monotonic() - started >= SMALL.slow_seconds


def test_files_robots_and_xhtml(site: CrawlSite) -> None:
    with httpx.Client(base_url=site.origin) as client:
        pdf = client.get("/files/doc.pdf")
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf.content.startswith(b"%PDF")
        png = client.get("/files/image.png")
        assert png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG")
        text = client.get("/files/notes.txt")
        assert not is_html(text.headers["content-type"])
        assert "/trap/" in text.text
        xhtml = client.get("/xhtml")
        assert is_html(xhtml.headers["content-type"])
        robots = client.get("/robots.txt")
        assert robots.text == SMALL.robots_text()
        rules = Robots.parse(robots.text, site.url)
        assert not rules.allowed(site.url_for("/private/0"), "crawlq")
        assert rules.allowed(site.url_for("/private/public/page"), "crawlq")
        for mode in ("404", "500"):
            site.robots_mode = mode
            assert client.get("/robots.txt").status_code == int(mode)
        site.robots_mode = "ok"
    delayed = SiteSpec(crawl_delay=0.5).robots_text()
    assert Robots.parse(delayed, "http://x/").crawl_delay("crawlq") == 0.5


def test_huge_page_and_bombs_are_small_on_the_wire(site: CrawlSite) -> None:
    with httpx.Client(base_url=site.origin) as client:
        with client.stream("GET", "/huge") as huge:
            assert int(huge.headers["content-length"]) == SMALL.huge_bytes
            read = 0
            for chunk in huge.iter_raw():
                read += len(chunk)
                if read > 1024 * 1024:
                    break
        for path, encoding, most in (("/bomb/gzip", "gzip", 2_000_000), ("/bomb/br", "br", 10_000)):
            with client.stream("GET", path) as bomb:
                assert bomb.headers["content-encoding"] == encoding
                wire = b"".join(bomb.iter_raw())
                assert len(wire) == int(bomb.headers["content-length"]) < most


def test_the_log_records_requests(site: CrawlSite) -> None:
    site.reset_log()
    before = time.monotonic()
    with httpx.Client(base_url=site.origin, headers={"User-Agent": "probe/1"}) as client:
        client.get("/p/3")
        client.get("/p/%33#x")
    records = site.requests_for("/p/3")
    assert [r.raw_path for r in records] == ["/p/3", "/p/%33"]
    for record in records:
        assert record.method == "GET"
        assert record.user_agent == "probe/1"
        assert record.status == 200
        assert record.finished is not None
        assert before <= record.started <= record.finished <= time.monotonic()
    assert site.fetch_counts() == Counter({"/p/3": 2})
    site.reset_log()
    assert site.log == []


def test_many_concurrent_keep_alive_connections(site: CrawlSite) -> None:
    async def main() -> list[FetchResult]:
        async with Fetcher(FetchSettings(policy=OPEN, max_connections=100)) as fetcher:
            return await asyncio.gather(
                *(fetcher.fetch(site.url_for("/slow/1")) for _ in range(60))
            )

    started = time.monotonic()
    results = asyncio.run(main())
    assert all(r.status == 200 for r in results)
    assert time.monotonic() - started < 1.5  # served in parallel, not one by one
    assert len(site.requests_for("/slow/1")) >= 60


def test_shutdown_is_quick_with_a_hanging_request() -> None:
    site = CrawlSite(SiteSpec(pages=10)).start()
    idle = socket.create_connection(("127.0.0.1", site.port))
    idle.sendall(b"GET /p/1 HTTP/1.1\r\nHost: x\r\n\r\n")
    idle.recv(65536)  # a keep-alive connection left open
    hanging = socket.create_connection(("127.0.0.1", site.port))
    hanging.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.1)
    robots = threading.Thread(target=_get, args=(site.port, "/robots.txt"))
    site.robots_mode = "hang"
    robots.start()
    time.sleep(0.1)
    started = time.monotonic()
    site.close()
    assert time.monotonic() - started < 2
    hanging.settimeout(2)
    assert hanging.recv(100) == b""  # aborted, no response
    robots.join(2)
    assert not robots.is_alive()
    hang = site.requests_for("/hang")[0]
    assert hang.status is None and hang.finished is not None
    idle.close()
    hanging.close()


def _get(port: int, path: str) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        sock.recv(100)


# --- the sentinel and the private spellings -------------------------------------------------


def test_the_sentinel_counts_connections() -> None:
    with Sentinel() as sentinel:
        assert sentinel.connections == 0
        for _ in range(3):
            socket.create_connection(("127.0.0.1", sentinel.port)).close()
        deadline = time.monotonic() + 2
        while sentinel.connections < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sentinel.connections == 3
        sentinel.reset()
        assert sentinel.connections == 0


def test_private_spellings_are_refused_by_default_with_no_connection() -> None:
    assert len(PRIVATE_SPELLINGS) >= 50
    assert len(set(PRIVATE_SPELLINGS)) == len(PRIVATE_SPELLINGS)
    with Sentinel() as sentinel:
        urls = [spelling.format(port=sentinel.port) for spelling in PRIVATE_SPELLINGS]
        for url in urls:
            host = urllib.parse.urlsplit(url).hostname
            assert host is not None
            with pytest.raises(AddressRefused):
                resolve_checked(host, sentinel.port)

        async def main() -> list[FetchResult]:
            async with Fetcher(FetchSettings(deadline=5)) as fetcher:
                return await asyncio.gather(*(fetcher.fetch(url) for url in urls))

        for url, result in zip(urls, asyncio.run(main()), strict=True):
            assert (result.error or "").startswith("refused"), (url, result.error)
        time.sleep(0.1)
        assert sentinel.connections == 0


@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
def test_loopback_spellings_reach_the_sentinel_when_allowed(spelling: str) -> None:
    with Sentinel() as sentinel:
        url = spelling.format(port=sentinel.port)

        async def main() -> FetchResult:
            async with Fetcher(FetchSettings(policy=OPEN, deadline=5)) as fetcher:
                return await fetcher.fetch(url)

        result = asyncio.run(main())
        assert result.error is not None  # the sentinel closes at once
        deadline = time.monotonic() + 2
        while sentinel.connections == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sentinel.connections >= 1, (url, result.error)


def test_the_factory_fixture(crawl_site: Callable[..., CrawlSite]) -> None:
    site = crawl_site(pages=20, bombs=False, robots_mode="404")
    other = crawl_site(SiteSpec(pages=5), seed=3)
    assert site.port != other.port
    assert (site.spec.pages, other.spec.seed) == (20, 3)
    assert httpx.get(site.url_for("/robots.txt")).status_code == 404
    assert "/bomb/gzip" not in site.model.resources
